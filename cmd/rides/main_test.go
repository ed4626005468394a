package main

import (
	"testing"

	"github.com/rocketrides/rocketrides/internal/testing/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }
