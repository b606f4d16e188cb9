package migrations

import "strings"

// splitStatements splits a migration that runs outside a transaction into
// its statements, each run on its own (several in one query string would
// run as one implicit transaction, which CREATE INDEX CONCURRENTLY
// refuses). A semicolon ends a statement unless it is inside a quoted
// string or identifier, a dollar-quoted body or a comment; statements of
// comments alone are dropped.
func splitStatements(sql string) []string {
	var out []string
	start := 0
	for i := 0; i < len(sql); {
		switch c := sql[i]; {
		case c == ';':
			out = appendStatement(out, sql[start:i+1])
			i++
			start = i
		case c == '\'' || c == '"':
			i = quoted(sql, i, c, escapes(sql, i))
		case c == '$':
			i = dollarQuoted(sql, i)
		case strings.HasPrefix(sql[i:], "--"):
			i = lineComment(sql, i)
		case strings.HasPrefix(sql[i:], "/*"):
			i = blockComment(sql, i)
		default:
			i++
		}
	}
	return appendStatement(out, sql[start:])
}

// appendStatement appends stmt, trimmed, unless it holds only comments.
func appendStatement(out []string, stmt string) []string {
	stmt = strings.TrimSpace(stmt)
	for rest := stmt; rest != ""; {
		switch {
		case strings.HasPrefix(rest, "--"):
			rest = strings.TrimSpace(rest[lineComment(rest, 0):])
		case strings.HasPrefix(rest, "/*"):
			rest = strings.TrimSpace(rest[blockComment(rest, 0):])
		case rest == ";":
			return out
		default:
			return append(out, stmt)
		}
	}
	return out
}

// escapes says the quote at i opens an escape string (E'…'), in which a
// backslash escapes the next character.
func escapes(sql string, i int) bool {
	if sql[i] != '\'' || i == 0 || (sql[i-1] != 'E' && sql[i-1] != 'e') {
		return false
	}
	return i == 1 || !isIdentChar(sql[i-2])
}

// quoted returns the index after the string or identifier quoted by q that
// opens at i; a doubled quote stands for itself.
func quoted(sql string, i int, q byte, backslash bool) int {
	for i++; i < len(sql); i++ {
		switch {
		case backslash && sql[i] == '\\':
			i++
		case sql[i] == q && i+1 < len(sql) && sql[i+1] == q:
			i++
		case sql[i] == q:
			return i + 1
		}
	}
	return len(sql)
}

// dollarQuoted returns the index after the dollar-quoted body that opens
// at i ($$…$$ or $tag$…$tag$), or i+1 when the $ opens none (a parameter
// such as $1, or a $ inside an identifier).
func dollarQuoted(sql string, i int) int {
	if i > 0 && isIdentChar(sql[i-1]) {
		return i + 1
	}
	j := i + 1
	for j < len(sql) && isIdentChar(sql[j]) && (j != i+1 || sql[j] < '0' || sql[j] > '9') {
		j++
	}
	if j >= len(sql) || sql[j] != '$' {
		return i + 1
	}
	tag := sql[i : j+1]
	if end := strings.Index(sql[j+1:], tag); end >= 0 {
		return j + 1 + end + len(tag)
	}
	return len(sql)
}

// lineComment returns the index after the -- comment at i.
func lineComment(sql string, i int) int {
	if end := strings.IndexByte(sql[i:], '\n'); end >= 0 {
		return i + end + 1
	}
	return len(sql)
}

// blockComment returns the index after the /* comment */ at i, which may
// nest.
func blockComment(sql string, i int) int {
	depth := 0
	for i < len(sql) {
		switch {
		case strings.HasPrefix(sql[i:], "/*"):
			depth++
			i += 2
		case strings.HasPrefix(sql[i:], "*/"):
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return len(sql)
}

func isIdentChar(c byte) bool {
	return c == '_' || c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}
