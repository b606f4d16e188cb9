// Package docs holds burnpoller's documentation, in Markdown, and the tests
// that keep it true to the code: every Go block in README.md and docs/
// compiles, every block that shows an example is that example's source,
// and every link points at a file and a heading that exist (see
// development.md, "Documentation").
package docs
