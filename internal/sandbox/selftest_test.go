package sandbox

import (
	"context"
	"testing"
)

func TestSelfTest(t *testing.T) {
	for _, noSeccomp := range []bool{false, true} {
		e := newTestEngine(t, func(c *Config) { c.NoSeccomp = noSeccomp })
		for _, c := range e.SelfTest(context.Background()) {
			if !c.OK {
				t.Errorf("noSeccomp=%v: %s: %s", noSeccomp, c.Name, c.Detail)
			}
		}
	}
}
