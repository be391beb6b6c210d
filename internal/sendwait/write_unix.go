//go:build unix

package sendwait

import "syscall"

const supported = true

func write(fd uintptr, b []byte) (int, error) { return syscall.Write(int(fd), b) }
