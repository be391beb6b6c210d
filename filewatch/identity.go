package filewatch

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// MaxRead bounds how much of a file is hashed; beyond it only the size and
// modification time tell a change (the files followed are configurations
// and certificates, a few KiB).
const MaxRead = 4 << 20

// identity is what a path's content is judged by. The zero identity is
// "never read".
type identity struct {
	real  string // the path with every symlink resolved
	size  int64
	mtime int64 // nanoseconds since the epoch
	sum   [sha256.Size]byte
}

// identify reads path's identity.
func identify(path string) (identity, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return identity{}, err
	}
	f, err := os.Open(real)
	if err != nil {
		return identity{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return identity{}, err
	}
	if !fi.Mode().IsRegular() {
		return identity{}, fmt.Errorf("filewatch: %s is not a regular file", real)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, MaxRead)); err != nil {
		return identity{}, err
	}
	id := identity{real: real, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	h.Sum(id.sum[:0])
	return id, nil
}
