package warm

import (
	_ "embed"
	"fmt"
	"strings"

	"boxer/internal/sandbox/nsinit"
)

// zygote.py isolates children and runs their jobs; zygote_speed.py, which
// it imports, makes forks and children cheap; zygote_session.py, which a
// session's child imports, runs a session's cells.
var (
	//go:embed zygote.py
	zygoteSource string
	//go:embed zygote_speed.py
	speedSource string
	//go:embed zygote_session.py
	sessionSource string
)

// Path is where the zygote's program lies in its sandbox; Argv runs it.
const Path = "/usr/lib/boxer/zygote.py"

// Argv is the zygote's command line.
var Argv = []string{"python", Path}

// Files are what a zygote sandbox adds to a cold one's: the zygote's
// program, and /etc/passwd and /etc/group naming each child's uid and gid,
// uid+0 to uid+slots-1, "sandbox".
func Files(uid, slots int) []nsinit.File {
	return []nsinit.File{
		{Path: "/etc/passwd", Mode: 0o644, Content: passwd(uid, slots)},
		{Path: "/etc/group", Mode: 0o644, Content: group(uid, slots)},
		{Path: Path, Mode: 0o644, Content: zygoteSource},
		{Path: "/usr/lib/boxer/zygote_speed.py", Mode: 0o644, Content: speedSource},
		{Path: "/usr/lib/boxer/zygote_session.py", Mode: 0o644, Content: sessionSource},
	}
}

func group(uid, slots int) string {
	var b strings.Builder
	b.WriteString("root:x:0:\n")
	for i := range slots {
		fmt.Fprintf(&b, "sandbox:x:%d:\n", uid+i)
	}
	b.WriteString("nogroup:x:65534:\n")
	return b.String()
}

func passwd(uid, slots int) string {
	var b strings.Builder
	b.WriteString("root:x:0:0:root:/root:/usr/sbin/nologin\n")
	for i := range slots {
		fmt.Fprintf(&b, "sandbox:x:%d:%d:sandbox:/tmp:/usr/sbin/nologin\n", uid+i, uid+i)
	}
	b.WriteString("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
	return b.String()
}
