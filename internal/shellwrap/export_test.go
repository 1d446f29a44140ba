package shellwrap

// Shells lets the tests check every shell against the rules' reading.
var Shells = shells
