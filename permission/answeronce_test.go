package permission

import "testing"

func TestSentFor(t *testing.T) {
	once := option{OptionID: "allow-once", Kind: "allow_once"}
	always := option{OptionID: "allow-with-updates", Kind: "allow_always"}
	rejectAlways := option{OptionID: "apply_network_policy_amendment:1", Kind: "reject_always"}
	turn := option{OptionID: "allow_permissions_turn", Kind: "allow_once"}
	unknownKind := option{OptionID: "allow-forever", Kind: "allow_forever"}
	cases := []struct {
		name           string
		options        []option
		chosen         option
		kind           string
		sent           string
		agentRemembers bool
	}{
		{"an always is sent as once", []option{always, once}, always, "execute", "allow-once", false},
		{"a once is sent as it is", []option{always, once}, once, "execute", "allow-once", false},
		{"a grant for the turn is sent as once", []option{turn, once}, turn, "other", "allow-once", false},
		{"an allow of a kind ACP does not name is sent as once", []option{unknownKind, once}, unknownKind, "execute", "allow-once", false},
		{"a reject always is sent as chosen", []option{once, rejectAlways}, rejectAlways, "execute", rejectAlways.OptionID, false},
		{"switch_mode is sent as chosen", []option{always, once}, always, "switch_mode", "allow-with-updates", false},
		{"without a once-option the always is sent, and said", []option{always}, always, "execute", "allow-with-updates", true},
		{"a turn grant is no once-option", []option{always, turn}, always, "execute", "allow-with-updates", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sent, why := sentFor(c.options, c.chosen, c.kind)
			if sent.OptionID != c.sent || (why != "") != c.agentRemembers {
				t.Errorf("sentFor = %q (%q), want %q (agent remembers: %v)", sent.OptionID, why, c.sent, c.agentRemembers)
			}
		})
	}
}
