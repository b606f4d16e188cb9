package migrations

// Files are the embedded migrations, for the test that applies them with
// tern's own runner.
var Files = files

// SplitStatements is splitStatements, for its table test.
var SplitStatements = splitStatements
