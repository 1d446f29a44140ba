package session

import "encoding/json"

// ClientInfo is the clientInfo the editor sent in initialize, exactly as
// sent; nil before initialize or when it sent none.
func (e *Editor) ClientInfo() json.RawMessage { return e.b.tracker.agentInfo().ClientInfo }
