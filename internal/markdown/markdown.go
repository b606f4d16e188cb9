// Package markdown reads what the documentation tests check in a Markdown
// file: its fenced code blocks, its links and the anchors of its headings,
// as GitHub renders them. It understands the subset of Markdown this
// repository writes (ATX headings, fenced blocks, inline links), not all of
// CommonMark.
package markdown

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Block is a fenced code block.
type Block struct {
	// Lang is the fence's info string up to the first space ("go", "sh").
	Lang string
	// Line is the 1-based line of the block's first line of code.
	Line int
	// Code is the block's text, its fence's indentation removed, ending in
	// a newline unless empty.
	Code string
	// Directive is the HTML comment on the line right before the opening
	// fence, without "<!--" and "-->" and trimmed; "" when there is none.
	Directive string
}

// Blocks returns the fenced code blocks of src in order. An unclosed fence
// runs to the end of src.
func Blocks(src []byte) []Block {
	var (
		blocks []Block
		cur    *Block
		indent string
		fence  string
		prev   string
	)
	for i, line := range lines(src) {
		trimmed := strings.TrimLeft(line, " ")
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				cur = &Block{Line: i + 2, Directive: directive(prev)}
				if info := strings.Fields(trimmed[len(f):]); len(info) > 0 {
					cur.Lang = info[0]
				}
				indent, fence = line[:len(line)-len(trimmed)], f
			}
			prev = line
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(trimmed[len(fence):]) == "" {
			blocks = append(blocks, *cur)
			cur, prev = nil, line
			continue
		}
		cur.Code += strings.TrimPrefix(line, indent) + "\n"
	}
	if cur != nil {
		blocks = append(blocks, *cur)
	}
	return blocks
}

// fenceOf returns the fence a line opens ("```" or longer, or "~~~"), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
		if n >= 3 {
			return trimmed[:n]
		}
	}
	return ""
}

// directive returns the text of an HTML comment that is the whole line.
func directive(line string) string {
	s := strings.TrimSpace(line)
	if !strings.HasPrefix(s, "<!--") || !strings.HasSuffix(s, "-->") {
		return ""
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(s, "<!--"), "-->"))
}

func lines(src []byte) []string {
	return strings.Split(strings.TrimSuffix(string(src), "\n"), "\n")
}

// prose returns src's lines with those of fenced code blocks (fences
// included) blanked, so that links and headings are read only where they
// render; the slice index is the line number minus one.
func prose(src []byte) []string {
	all := lines(src)
	out := make([]string, len(all))
	fence := ""
	for i, line := range all {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence == "":
			if f := fenceOf(trimmed); f != "" {
				fence = f
				continue
			}
			out[i] = line
		case strings.HasPrefix(trimmed, fence) && strings.TrimSpace(trimmed[len(fence):]) == "":
			fence = ""
		}
	}
	return out
}

var (
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	link     = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
)

// Link is an inline link.
type Link struct {
	// Target is what the link points at: a URL, a path, "#anchor" or
	// "path#anchor".
	Target string
	// Line is the 1-based line the link is on.
	Line int
}

// Links returns the inline links of src outside code, in order. A link's
// text may run over several lines; Line is where it starts.
func Links(src []byte) []Link {
	text := strings.Join(prose(src), "\n")
	// A link's syntax inside a code span is text (a span may run over a
	// line break too); blanking it keeps every offset.
	text = codeSpan.ReplaceAllStringFunc(text, func(s string) string {
		return strings.Map(func(r rune) rune {
			if r == '\n' {
				return r
			}
			return ' '
		}, s)
	})
	var out []Link
	for _, m := range link.FindAllStringSubmatchIndex(text, -1) {
		out = append(out, Link{Target: text[m[4]:m[5]], Line: strings.Count(text[:m[0]], "\n") + 1})
	}
	return out
}

// Anchors returns the anchors GitHub gives src's headings: each heading's
// Slug, followed by -1, -2, ... when an earlier heading has the same one.
func Anchors(src []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(src) {
		h, ok := heading(line)
		if !ok {
			continue
		}
		s := Slug(h)
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// heading returns the text of an ATX heading line ("## Text").
func heading(line string) (string, bool) {
	t := strings.TrimLeft(line, " ")
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n == 0 || n > 6 || len(t) == n || t[n] != ' ' {
		return "", false
	}
	return strings.TrimSpace(strings.TrimRight(strings.TrimSpace(t[n:]), "#")), true
}

// Slug is the anchor GitHub derives from a heading's text: its rendered
// text (links and emphasis reduced to their words) in lower case, without
// punctuation other than '-' and '_', each space a '-'.
func Slug(heading string) string {
	heading = link.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
