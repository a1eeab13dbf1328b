package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// envFlags registers flags whose defaults come from BOXER_* environment
// variables, so every setting can be given either way (a flag wins). The
// usage text names the variable. A variable that does not parse is
// reported by errs, not silently ignored.
type envFlags struct {
	fs   *flag.FlagSet
	errs []error
}

// newEnvFlags is a flag set for command name, with its usage text.
func newEnvFlags(name, usage string, stderr io.Writer) *envFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	return &envFlags{fs: fs}
}

// parse parses args and checks the BOXER_* variables read on the way; on
// a problem it reports it and returns false (the caller exits 2).
func (e *envFlags) parse(args []string) bool {
	if err := e.fs.Parse(args); err != nil {
		return false
	}
	if err := errors.Join(e.errs...); err != nil {
		fmt.Fprintln(e.fs.Output(), "boxer "+e.fs.Name()+":", err)
		return false
	}
	return true
}

func (e *envFlags) lookup(env string) (string, bool) {
	v, ok := os.LookupEnv(env)
	return strings.TrimSpace(v), ok
}

func (e *envFlags) bad(env, v string, err error) {
	e.errs = append(e.errs, fmt.Errorf("%s=%q: %v", env, v, err))
}

func (e *envFlags) str(p *string, name, env, def, usage string) {
	if v, ok := e.lookup(env); ok {
		def = v
	}
	e.fs.StringVar(p, name, def, usage+" ("+env+")")
}

func (e *envFlags) integer(p *int, name, env string, def int, usage string) {
	if v, ok := e.lookup(env); ok {
		n, err := strconv.Atoi(v)
		if err != nil {
			e.bad(env, v, err)
		}
		def = n
	}
	e.fs.IntVar(p, name, def, usage+" ("+env+")")
}

func (e *envFlags) float(p *float64, name, env string, def float64, usage string) {
	if v, ok := e.lookup(env); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			e.bad(env, v, err)
		}
		def = f
	}
	e.fs.Float64Var(p, name, def, usage+" ("+env+")")
}

func (e *envFlags) duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	if v, ok := e.lookup(env); ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			e.bad(env, v, err)
		}
		def = d
	}
	e.fs.DurationVar(p, name, def, usage+" ("+env+")")
}

func (e *envFlags) boolean(p *bool, name, env string, def bool, usage string) {
	if v, ok := e.lookup(env); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.bad(env, v, err)
		}
		def = b
	}
	e.fs.BoolVar(p, name, def, usage+" ("+env+")")
}

func (e *envFlags) bytes(p *int64, name, env string, def int64, usage string) {
	if v, ok := e.lookup(env); ok {
		n, err := parseBytes(v)
		if err != nil {
			e.bad(env, v, err)
		}
		def = n
	}
	*p = def
	e.fs.Func(name, fmt.Sprintf("%s (%s) (default %d)", usage, env, def), func(s string) error {
		n, err := parseBytes(s)
		*p = n
		return err
	})
}

// id is a user or group id; 0 means the default the usage names.
func (e *envFlags) id(p *uint32, name, env, usage string) {
	parse := func(s string) error {
		n, err := strconv.ParseUint(s, 10, 32)
		*p = uint32(n)
		return err
	}
	if v, ok := e.lookup(env); ok {
		if err := parse(v); err != nil {
			e.bad(env, v, err)
		}
	}
	e.fs.Func(name, fmt.Sprintf("%s (%s)", usage, env), parse)
}

// list is a comma-separated list; an empty value is an empty list.
func (e *envFlags) list(p *[]string, name, env, def, usage string) {
	if v, ok := e.lookup(env); ok {
		def = v
	}
	*p = splitList(def)
	e.fs.Func(name, fmt.Sprintf("%s, comma-separated (%s) (default %q)", usage, env, def), func(s string) error {
		*p = splitList(s)
		return nil
	})
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
