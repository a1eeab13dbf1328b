//go:build !linux

package cgroup

import "errors"

// New fails: cgroups exist only on Linux. It is here so that packages
// importing this one still build, and their tests run, elsewhere.
func New(opts Options) (Manager, error) {
	return nil, errors.New("cgroup: cgroups need Linux")
}
