package rules

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"
)

// glob matches a whole string: `*` any run of characters (slashes
// included), `?` one character, `[abc]`/`[a-z]`/`[!a]` one character of a
// class, and `\x` the character x itself.
type glob struct {
	src string
	re  *regexp.Regexp
	// literal is set when the pattern has no wildcard, so matching is a
	// string comparison.
	literal    string
	hasLiteral bool
}

func compileGlob(src string) (*glob, error) {
	re, literal, err := globRegexp(src, nil)
	if err != nil {
		return nil, err
	}
	g := &glob{src: src}
	if literal != nil {
		g.literal, g.hasLiteral = *literal, true
		return g, nil
	}
	g.re, err = regexp.Compile(re)
	if err != nil {
		return nil, fmt.Errorf("glob %q: %v", src, err)
	}
	return g, nil
}

// globRegexp translates a glob into an anchored regexp. quoted marks byte
// offsets whose characters are literal whatever they are (they were quoted
// in a shell word). It returns the literal text instead when the glob has
// no wildcard.
func globRegexp(src string, quoted []bool) (string, *string, error) {
	var b strings.Builder
	var lit strings.Builder
	wild := false
	b.WriteString("^(?s:")
	for i := 0; i < len(src); {
		c := src[i]
		if quoted != nil && quoted[i] {
			r, n := utf8.DecodeRuneInString(src[i:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			lit.WriteRune(r)
			i += n
			continue
		}
		switch c {
		case '*':
			wild = true
			b.WriteString(".*")
			i++
		case '?':
			wild = true
			b.WriteString(".")
			i++
		case '\\':
			if i+1 >= len(src) {
				return "", nil, fmt.Errorf("glob %q ends with a lone backslash", src)
			}
			r, n := utf8.DecodeRuneInString(src[i+1:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			lit.WriteRune(r)
			i += 1 + n
		case '[':
			end := strings.IndexByte(src[i+1:], ']')
			if end < 0 {
				return "", nil, fmt.Errorf("glob %q has an unclosed '['", src)
			}
			class := src[i+1 : i+1+end]
			if class == "" || class == "!" {
				return "", nil, fmt.Errorf("glob %q has an empty character class", src)
			}
			wild = true
			b.WriteByte('[')
			if class[0] == '!' || class[0] == '^' {
				b.WriteByte('^')
				class = class[1:]
			}
			for _, r := range class {
				if r == '-' {
					b.WriteByte('-')
				} else {
					b.WriteString(regexp.QuoteMeta(string(r)))
				}
			}
			b.WriteByte(']')
			i += end + 2
		default:
			r, n := utf8.DecodeRuneInString(src[i:])
			b.WriteString(regexp.QuoteMeta(string(r)))
			lit.WriteRune(r)
			i += n
		}
	}
	b.WriteString(")$")
	if !wild {
		s := lit.String()
		return "", &s, nil
	}
	return b.String(), nil, nil
}

func (g *glob) match(s string) bool {
	if g.hasLiteral {
		return s == g.literal
	}
	return g.re.MatchString(s)
}

// commandPattern is an argv pattern written as shell words: each word is a
// glob matching exactly one argument, and a final unquoted `*` word matches
// any number of remaining arguments, none included.
type commandPattern struct {
	src   string
	words []*glob
	rest  bool // ends with the `*` word
}

func compileCommandPattern(src string) (*commandPattern, error) {
	words, quoted, err := splitWords(src)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("command pattern %q is empty", src)
	}
	p := &commandPattern{src: src}
	if last := len(words) - 1; words[last] == "*" && !quoted[last][0] {
		p.rest = true
		words, quoted = words[:last], quoted[:last]
		if len(words) == 0 {
			return nil, fmt.Errorf("command pattern %q matches every command; name the program", src)
		}
	}
	for i, w := range words {
		re, literal, err := globRegexp(w, quoted[i])
		if err != nil {
			return nil, err
		}
		g := &glob{src: w}
		if literal != nil {
			g.literal, g.hasLiteral = *literal, true
		} else if g.re, err = regexp.Compile(re); err != nil {
			return nil, err
		}
		p.words = append(p.words, g)
	}
	return p, nil
}

// program returns the pattern's program name when it is a literal, for the
// rule index.
func (p *commandPattern) program() (string, bool) {
	if p.words[0].hasLiteral {
		return p.words[0].literal, true
	}
	return "", false
}

func (p *commandPattern) match(argv []string) bool {
	if len(argv) < len(p.words) || (!p.rest && len(argv) != len(p.words)) {
		return false
	}
	for i, g := range p.words {
		if !g.match(argv[i]) {
			return false
		}
	}
	return true
}

// splitWords splits a pattern into shell-like words: blanks separate words,
// single and double quotes group and make their contents literal, and a
// backslash makes the next character literal. For each word it reports which
// bytes were quoted.
func splitWords(src string) (words []string, quoted [][]bool, err error) {
	var cur []byte
	var q []bool
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, string(cur))
			quoted = append(quoted, q)
		}
		cur, q, inWord = nil, nil, false
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			flush()
		case c == '\\':
			if i+1 >= len(src) {
				return nil, nil, fmt.Errorf("command pattern %q ends with a lone backslash", src)
			}
			i++
			cur, q, inWord = append(cur, src[i]), append(q, true), true
		case c == '\'' || c == '"':
			end := strings.IndexByte(src[i+1:], c)
			if end < 0 {
				return nil, nil, fmt.Errorf("command pattern %q has an unclosed %c", src, c)
			}
			for _, b := range []byte(src[i+1 : i+1+end]) {
				cur, q = append(cur, b), append(q, true)
			}
			inWord = true
			i += end + 1
		default:
			cur, q, inWord = append(cur, c), append(q, false), true
		}
	}
	flush()
	return words, quoted, nil
}

// urlPattern matches URLs: either `domain:example.com` (http or https, that
// host or a subdomain, no user info) or a glob over the whole URL.
type urlPattern struct {
	src    string
	domain string
	// exactHost limits a domain pattern to the host itself, without its
	// subdomains (remembered answers are that narrow).
	exactHost bool
	glob      *glob
}

func compileURLPattern(src string) (*urlPattern, error) {
	if d, ok := strings.CutPrefix(src, "domain:"); ok {
		d = strings.ToLower(strings.TrimSuffix(d, "."))
		if d == "" || strings.ContainsAny(d, "/:@*?[] ") {
			return nil, fmt.Errorf("url pattern %q: after domain: give a host name such as example.com", src)
		}
		return &urlPattern{src: src, domain: d}, nil
	}
	if !strings.Contains(src, "://") {
		return nil, fmt.Errorf("url pattern %q needs a scheme (https://...) or the domain: form", src)
	}
	g, err := compileGlob(src)
	if err != nil {
		return nil, err
	}
	return &urlPattern{src: src, glob: g}, nil
}

func (p *urlPattern) match(u *url.URL) bool {
	if p.domain != "" {
		if u.Scheme != "http" && u.Scheme != "https" || u.User != nil {
			return false
		}
		host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
		return host == p.domain || (!p.exactHost && strings.HasSuffix(host, "."+p.domain))
	}
	if u.User != nil && !strings.Contains(p.src, "@") {
		return false
	}
	return p.glob.match(u.String())
}
