// Package rules owns the rule language: reading the TOML rule files of every
// layer, reading a permission request into the actions it would take (each
// simple command, each path, each URL, each MCP tool), and deciding it.
//
// It is pure policy. It never touches the wire, never runs a command or a
// shell (commands are parsed, not executed), and reads the file system only
// to load rule files (finding the project files on the way up to home or a .git, and whose
// directories they are),
// to resolve symbolic links in the paths it judges, to see whether a
// directory a command writes into holds a .git or a .acp-broker.toml, and,
// for rules check, to look a channel's program up in PATH. What it knows of programs (wrappers, shells,
// interpreters, subcommands, options that run code, what a program writes)
// is in one table, programs.go, read by the shell analysis, by what "always"
// remembers and by the protected-argument check.
//
// The engine's promise is that nothing is allowed unless everything it
// carries is: a request is allowed only when every one of its actions is
// allowed by a rule or a safe default, it is denied when any one is denied,
// and anything the engine cannot see through or does not understand is never
// allowed, whatever the rules say.
package rules
