// Package config reads burnpoller's configuration from the environment
// with envconfig, never changing the environment, and checks it whole: Load
// returns every problem at once, one line each, each naming its variable.
// Print shows every variable with its default, value and meaning (secrets
// redacted), and Markdown writes docs/configuration.md from the same tags.
// The variable names are an interface: other tools drive the binary
// through them.
package config
