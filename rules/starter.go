package rules

// StarterConfig is what `acp-broker init` writes: a user config that parses,
// explains itself, and loosens nothing beyond the safe defaults.
const StarterConfig = `# acp-broker user config: one rule file for every agent you run through it.
#
# Without a rule, the broker's safe defaults apply: tools that only read
# (kinds read, search, think) are allowed; everything else (commands, edits,
# fetches, MCP tools) goes to you. Protected paths (~/.ssh, ~/.aws, .env files,
# .git internals, the broker's own files) are never allowed by a default or a
# broad rule.
#
# Precedence: deny beats ask beats allow, whatever the order or the layer.
# Check your rules with:   acp-broker rules check
# Try a request with:      acp-broker rules explain --command "git push --force"

# Ask before reads too (default "allow").
# read_only = "ask"

# Refuse what must never happen.
[[rule]]
id = "no-force-push"
decision = "deny"
reason = "force pushes rewrite shared history"
command = ["git push --force *", "git push -f *", "git push --force-with-lease *"]
examples = ["git push --force origin main", "env GIT_TRACE=1 git push -f"]
counterexamples = ["git push origin main"]

# Allow what you run all day without thinking. A trailing * matches any
# further arguments; every other word matches exactly one argument.
[[rule]]
id = "git-read-only"
decision = "allow"
command = ["git status", "git status *", "git diff *", "git log *", "git show *"]
examples = ["git diff --stat", "git log --oneline -5"]
counterexamples = ["git push", "git status; rm -rf ~"]

# Edits inside the project need no prompt (./ is the session's directory).
# [[rule]]
# id = "edit-project"
# decision = "allow"
# kind = ["edit"]
# path = "./**"

# Fetch documentation from one site.
# [[rule]]
# decision = "allow"
# url = "domain:docs.python.org"

# MCP tools you know only read; or let a server you trust say so itself
# (its readOnlyHint annotations, pinned when first seen: 'acp-broker mcp tools').
# [mcp.github]
# read_only_tools = ["get_*", "list_*", "search_*"]
# trust_annotations = true

# Stdio MCP servers run through the broker, which governs their tool calls.
# To pass them to the agent unchanged (and ungoverned):
# [mcp]
# proxy = false

# The broker switches Claude Code out of auto, bypassPermissions and dontAsk,
# Codex out of agent and agent-full-access, and Gemini CLI out of yolo: in
# them the agent decides by itself and never asks. To allow one anyway, or
# to leave the agent's modes alone ("keep"):
# [agent]
# allow_modes = ["auto"]
# modes = "keep"
`
