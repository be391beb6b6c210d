// Package browsertest drives a real headless Chromium against the
// gateway's dashboard (/dashboard on the admin listener). It is a module
// of its own so that the browser driver, chromedp, stays out of the main
// module's dependencies; it needs Debian's chromium at /usr/bin/chromium
// (or SPILLWAY_CHROMIUM), and .ci/run installs it and runs the test.
package browsertest
