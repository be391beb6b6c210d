//go:build !unix

package sendwait

import "syscall"

const supported = false

func write(uintptr, []byte) (int, error) { return 0, syscall.EINVAL }
