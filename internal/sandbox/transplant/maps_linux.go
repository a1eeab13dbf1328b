package transplant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ErrUnsupported is Copy on an architecture it does not know.
var ErrUnsupported = errors.New("forking a session is supported on x86-64 only")

// RefusedError is a source whose state cannot be carried over; Reason
// says why, for the caller.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "cannot fork: " + e.Reason }

const pageSize = 4096

// vma is one line of /proc/PID/maps.
type vma struct {
	start, end uint64
	perms      string // "rw-p": read, write, execute, private or shared
	offset     uint64
	dev        string
	inode      uint64
	path       string
}

func (v vma) shared() bool { return v.perms[3] == 's' }

// special mappings are the kernel's own ([vdso], [vvar]...), the program
// break's ([heap]) and the main stack's ([stack]): neither unmapped nor
// made again.
func (v vma) special() bool {
	return strings.HasPrefix(v.path, "[") && !strings.HasPrefix(v.path, "[anon:")
}

// anonymous mappings have no file: no path, or a name set with
// PR_SET_VMA_ANON_NAME.
func (v vma) anonymous() bool {
	return v.inode == 0 && (v.path == "" || strings.HasPrefix(v.path, "[anon:"))
}

// prot is the mapping's protection as mmap takes it.
func (v vma) prot() uintptr {
	var p uintptr
	for i, bit := range []uintptr{1, 2, 4} { // PROT_READ, PROT_WRITE, PROT_EXEC
		if v.perms[i] != '-' {
			p |= bit
		}
	}
	return p
}

func (v vma) String() string {
	return fmt.Sprintf("%x-%x %s %x %s %d %s", v.start, v.end, v.perms, v.offset, v.dev, v.inode, v.path)
}

// readMaps reads /proc/pid/maps.
func readMaps(pid int) ([]vma, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	var out []vma
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		v, err := parseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("/proc/%d/maps: %w", pid, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseMapsLine reads "start-end perms offset dev inode   path"; the path
// (which may hold spaces) is the rest of the line, the kernel escaping
// only a newline in it (as \012).
func parseMapsLine(line string) (vma, error) {
	var v vma
	rest := line
	var f [5]string
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			if i < 4 {
				return v, fmt.Errorf("short line %q", line)
			}
			j = len(rest)
		}
		f[i], rest = rest[:j], rest[j:]
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	var err1, err2, err3, err4 error
	v.start, err1 = strconv.ParseUint(lo, 16, 64)
	v.end, err2 = strconv.ParseUint(hi, 16, 64)
	v.offset, err3 = strconv.ParseUint(f[2], 16, 64)
	v.inode, err4 = strconv.ParseUint(f[4], 10, 64)
	if !ok || len(f[1]) != 4 || errors.Join(err1, err2, err3, err4) != nil || v.end <= v.start {
		return v, fmt.Errorf("bad line %q", line)
	}
	v.perms, v.dev = f[1], f[3]
	v.path = strings.ReplaceAll(strings.TrimLeft(rest, " "), `\012`, "\n")
	return v, nil
}

// Bits of a pagemap entry (Documentation/admin-guide/mm/pagemap.rst).
const (
	pmPresent = 1 << 63
	pmSwapped = 1 << 62
	pmFile    = 1 << 61 // a page-cache page, or shared anonymous
	pmPFN     = 1<<55 - 1
)

// readPagemaps reads the pagemap entries of each of vs, one slice each.
func readPagemaps(pm *os.File, vs []vma) ([][]uint64, error) {
	var total uint64
	for _, v := range vs {
		total += (v.end - v.start) / pageSize
	}
	all := make([]uint64, total)
	buf := make([]byte, 64<<10)
	out := make([][]uint64, len(vs))
	for k, v := range vs {
		n := (v.end - v.start) / pageSize
		out[k], all = all[:n:n], all[n:]
		for i := uint64(0); i < n; {
			m := min(n-i, uint64(len(buf)/8))
			if _, err := pm.ReadAt(buf[:8*m], int64((v.start/pageSize+i)*8)); err != nil {
				return nil, fmt.Errorf("pagemap %x-%x: %w", v.start, v.end, err)
			}
			for j := range m {
				out[k][i+j] = binary.LittleEndian.Uint64(buf[8*j:])
			}
			i += m
		}
	}
	return out, nil
}
