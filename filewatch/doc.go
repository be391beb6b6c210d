// Package filewatch follows a few small files — a configuration file,
// certificates and keys — and calls back when their content changes, however
// they are replaced.
//
// Watching a file itself (inotify on the file) loses it as soon as it is
// replaced by a rename: editors write a temporary file and rename it over
// the old one, and a Kubernetes ConfigMap or Secret volume mounts
// file -> ..data/file with ..data -> ..2026_12_01_09_00_00.1234 and
// swaps the whole set at once by renaming a new ..data_tmp symlink over
// ..data. A Watcher therefore watches directories: the directory of each
// path and the directory of the file it resolves to (one fsnotify watch
// per distinct directory, whatever the number of paths in it).
//
// Events only say that something in a directory moved. After a burst of
// them has gone quiet for Options.Debounce, the Watcher re-reads the
// identity of each path in the directories that had events — the real
// path it resolves to (filepath.EvalSymlinks), the size, the modification
// time and a SHA-256 of the first MaxRead bytes — and calls back with the
// paths whose identity differs from the last one seen. A touch of an
// unrelated file in the same directory re-reads the paths and calls back
// with nothing, so the callback never runs. A path that cannot be read
// (deleted, half-swapped, permission denied) keeps its last identity: its
// disappearance is not a change, its return with other content is.
//
// The Watcher is an adapter at the edge of the system: it owns one
// goroutine (Run), one fsnotify watcher and real timers.
package filewatch
