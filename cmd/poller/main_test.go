package main

import (
	"testing"

	"github.com/burnpoller/burnpoller/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
