package chain

// Scrub is what redactError makes of msg, an error text about rawURL.
func Scrub(msg, rawURL string) string { return scrub(msg, rawURL, RedactURL(rawURL)) }
