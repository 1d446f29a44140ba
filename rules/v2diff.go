package rules

// v2DiffChange is one file an ACP v2 diff changes: {operation: "add" |
// "delete" | "modify" | "move" | "copy" | a newer one, path, oldPath (move,
// copy)}.
type v2DiffChange struct {
	Operation string  `json:"operation"`
	Path      *string `json:"path"`
	OldPath   *string `json:"oldPath"`
}

// readV2Diff reads the files an ACP v2 diff changes. Each is a write,
// whatever the operation and the request's kind say (a move or a copy
// reads oldPath too, and a move removes it: both count as writes, the
// stricter reading); a change naming no path, or of an operation newer
// than this code, is not understood.
func (r *Request) readV2Diff(changes []v2DiffChange) {
	for _, c := range changes {
		switch c.Operation {
		case "add", "delete", "modify", "move", "copy":
		default:
			// A custom or future operation may touch files its change
			// names in members of its own: what it does is unknown.
			r.notUnderstood("a diff's change has the operation %q, which the broker does not know", c.Operation)
		}
		if c.Path == nil {
			r.notUnderstood("a diff's change has no path")
			continue
		}
		r.addPath(*c.Path, true, "diff")
		if c.OldPath != nil {
			r.addPath(*c.OldPath, true, "diff")
		}
	}
}
