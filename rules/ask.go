package rules

import (
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/BurntSushi/toml"
)

// AskConfig is the [ask] table: where requests the rules leave open go.
type AskConfig struct {
	// Route is "editor" (the default), "channels" or "both".
	Route string
	// EscalateAfter, if set, sends a request to the editor first and to the
	// channels too if nobody answered by then.
	EscalateAfter time.Duration
	// Timeout, if set, rejects a request nobody answered by then.
	Timeout time.Duration
	// Tell says which of the broker's own answers the user is told of in
	// the session: TellDenials (the default), TellAll or TellOff.
	Tell string

	// file and lines say where the table and its keys ("" for its header)
	// are written, for `rules check`.
	file  string
	lines map[string]int
}

// where returns file:line of one of the table's keys, else of its header;
// "" for the defaults, which no file sets.
func (c AskConfig) where(key string) string {
	if c.file == "" {
		return ""
	}
	line, ok := c.lines[key]
	if !ok {
		line = c.lines[""]
	}
	return fmt.Sprintf("%s:%d", c.file, line)
}

// The [ask] tell settings.
const (
	TellDenials = "denials"
	TellAll     = "all"
	TellOff     = "off"
)

// ChannelConfig is one [[channel]] table: a place outside the editor where
// the human can be asked.
type ChannelConfig struct {
	Name    string
	Type    string        // exec, ntfy or webhook
	Timeout time.Duration // this channel stops waiting after it; 0 for never

	Command []string // exec: the program and its arguments

	Server     string // ntfy: the server's URL
	Topic      string // ntfy: where prompts are published
	ReplyTopic string // ntfy: where answers come back (default: Topic + "-reply")
	TokenEnv   string // ntfy: the environment variable holding an access token

	URL       string // webhook: where the request is POSTed
	SecretEnv string // webhook: the environment variable holding the HMAC key
	Listen    string // webhook: the callback listener (default 127.0.0.1:0)
	PublicURL string // webhook: the listener's address as the receiver sees it

	File string
	Line int
}

var askKeys = []string{"route", "escalate_after", "timeout", "tell"}

var channelKeys = []string{"name", "type", "timeout", "command", "server", "topic", "reply_topic", "token_env", "url", "secret_env", "listen", "public_url"}

// ChannelTypes are the kinds of channel.
var ChannelTypes = []string{"exec", "ntfy", "webhook"}

// inProject skips a table a project file must not have: prompts sent to
// places a repository chooses could leak what the agent does, and a timeout
// it chooses could answer for the human.
func (d *decoder) inProject(at pos, table string) bool {
	if d.file.Layer != Project {
		return false
	}
	d.ignore(at, table, "a project file cannot choose where or how long you are asked (configure that in your user config)")
	return true
}

func (d *decoder) duration(prim toml.Primitive, at pos, key string) (time.Duration, error) {
	s, err := d.str(prim, at, key)
	if err != nil {
		return 0, err
	}
	dur, err := time.ParseDuration(s)
	if err != nil || dur <= 0 {
		return 0, d.errorf(at, `write a duration such as "30s", "5m" or "1h"`, "%s %q is not a positive duration", key, s)
	}
	return dur, nil
}

func (d *decoder) ask(prim toml.Primitive) error {
	at := d.loc.tableKey("", "ask")
	if d.inProject(at, "[ask]") {
		return nil
	}
	var table map[string]toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &table); err != nil {
		return d.errorf(at, "write an [ask] table", "ask must be a table")
	}
	cfg := &AskConfig{file: d.file.Path, lines: map[string]int{"": at.line}}
	for _, k := range sortedKeys(table) {
		at := d.loc.tableKey(k, "ask")
		cfg.lines[k] = at.line
		var err error
		switch k {
		case "route":
			cfg.Route, err = d.oneOf(table[k], at, k, []string{"editor", "channels", "both"})
		case "escalate_after":
			cfg.EscalateAfter, err = d.duration(table[k], at, k)
		case "timeout":
			cfg.Timeout, err = d.duration(table[k], at, k)
		case "tell":
			cfg.Tell, err = d.oneOf(table[k], at, k, []string{TellDenials, TellAll, TellOff})
		default:
			err = d.unknown(at, k, " in [ask]", askKeys)
		}
		if err != nil {
			return err
		}
	}
	d.file.Ask = cfg
	return nil
}

func (d *decoder) channels(prim toml.Primitive) error {
	var tables []map[string]toml.Primitive
	if err := d.md.PrimitiveDecode(prim, &tables); err != nil {
		return d.errorf(d.loc.topKey("channel"), "write each channel as a [[channel]] table", "channel must be a list of tables")
	}
	for i, table := range tables {
		head := d.loc.arrayTable("channel", i)
		if d.inProject(head, "[[channel]]") {
			continue
		}
		c := ChannelConfig{File: d.file.Path, Line: head.line}
		for _, k := range sortedKeys(table) {
			prim, at := table[k], d.loc.arrayTableKey("channel", i, k)
			var err error
			switch k {
			case "name":
				c.Name, err = d.str(prim, at, k)
			case "type":
				c.Type, err = d.oneOf(prim, at, k, ChannelTypes)
			case "timeout":
				c.Timeout, err = d.duration(prim, at, k)
			case "command":
				c.Command, err = d.strings(prim, at, k)
			case "server", "url", "public_url":
				var s string
				if s, err = d.str(prim, at, k); err == nil {
					if u, perr := url.Parse(s); perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
						err = d.errorf(at, `write a URL such as "https://ntfy.sh"`, "%s %q is not an http or https URL", k, s)
					}
				}
				switch k {
				case "server":
					c.Server = s
				case "url":
					c.URL = s
				default:
					c.PublicURL = s
				}
			case "topic":
				c.Topic, err = d.str(prim, at, k)
			case "reply_topic":
				c.ReplyTopic, err = d.str(prim, at, k)
			case "token_env":
				c.TokenEnv, err = d.str(prim, at, k)
			case "secret_env":
				c.SecretEnv, err = d.str(prim, at, k)
			case "listen":
				c.Listen, err = d.str(prim, at, k)
			default:
				err = d.unknown(at, k, " in [[channel]]", channelKeys)
			}
			if err != nil {
				return err
			}
		}
		if err := d.checkChannel(&c, head); err != nil {
			return err
		}
		d.file.Channels = append(d.file.Channels, c)
	}
	return nil
}

func (d *decoder) checkChannel(c *ChannelConfig, head pos) error {
	if c.Name == "" {
		return d.errorf(head, `add name = "phone" (any name; it shows in the audit log)`, "channel has no name")
	}
	if slices.ContainsFunc(d.file.Channels, func(o ChannelConfig) bool { return o.Name == c.Name }) {
		return d.errorf(head, "give each channel its own name", "a channel named %q is already defined", c.Name)
	}
	need := func(what, value, hint string) error {
		if value == "" {
			return d.errorf(head, hint, "%s channel %q needs %s", c.Type, c.Name, what)
		}
		return nil
	}
	switch c.Type {
	case "":
		return d.errorf(head, `add type = "exec", "ntfy" or "webhook"`, "channel %q has no type", c.Name)
	case "exec":
		if len(c.Command) == 0 {
			return d.errorf(head, `add command = ["notify-send", "..."]`, "exec channel %q needs a command", c.Name)
		}
	case "ntfy":
		if err := need("server", c.Server, `add server = "https://ntfy.sh"`); err != nil {
			return err
		}
		if err := need("topic", c.Topic, `add topic = "a-long-random-name": anyone who knows it can read your prompts`); err != nil {
			return err
		}
		if c.ReplyTopic == "" {
			c.ReplyTopic = c.Topic + "-reply"
		}
	case "webhook":
		if err := need("url", c.URL, `add url = "https://..."`); err != nil {
			return err
		}
		if err := need("secret_env", c.SecretEnv, `add secret_env = "ACP_BROKER_WEBHOOK_SECRET", the environment variable holding the HMAC key`); err != nil {
			return err
		}
		if c.Listen == "" {
			c.Listen = "127.0.0.1:0"
		}
	}
	return nil
}

// Settings for asking, from every layer: the first layer (managed, then
// user) that sets [ask] decides the routing; channels of every layer apply.
func (p *Policy) AskSettings() (AskConfig, []ChannelConfig) {
	var cfg AskConfig
	var channels []ChannelConfig
	set := false
	for _, layer := range []Layer{Managed, User} {
		for _, f := range p.Files {
			if f.Layer != layer {
				continue
			}
			if f.Ask != nil && !set {
				cfg, set = *f.Ask, true
			}
			channels = append(channels, f.Channels...)
		}
	}
	if cfg.Route == "" {
		cfg.Route = "editor"
	}
	if cfg.Tell == "" {
		cfg.Tell = TellDenials
	}
	return cfg, channels
}

func sortedKeys(m map[string]toml.Primitive) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (c ChannelConfig) String() string { return fmt.Sprintf("%s channel %q", c.Type, c.Name) }

// Where returns the channel's file:line, for messages.
func (c ChannelConfig) Where() string { return fmt.Sprintf("%s:%d", c.File, c.Line) }
