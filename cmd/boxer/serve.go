package main

import (
	"context"
	"fmt"
	"io"
)

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "boxer serve: the HTTP service is not built yet (issue 3)")
	return 1
}
