package testenv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a process gets after SIGTERM before its group is killed.
const stopGrace = 10 * time.Second

// process is one child binary running in its own process group, its output
// going to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // exit error, valid after done
}

// startProcess starts bin with args in its own process group, with stdout and
// stderr appended to dir/<name>.log. The child gets SIGKILL if the test binary
// dies without cleaning up (Pdeathsig).
func startProcess(dir, name, bin string, args []string, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening log of %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() { // owned by p: ends when the process exits
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the process id, which is also its process group id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGrace, and
// waits for the process to be reaped. Safe to call more than once.
func (p *process) stop() {
	if p.exited() {
		killGroup(p.pid(), syscall.SIGKILL) // anything the process left in its group
		return
	}
	killGroup(p.pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
	}
	killGroup(p.pid(), syscall.SIGKILL)
	<-p.done
}

func killGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pgid, sig)
	}
}

// logTail returns the last n lines of the process log.
func (p *process) logTail(n int) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 2*n {
			lines = append(lines[:0], lines[len(lines)-n:]...)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitError describes an early exit, with the end of the log.
func (p *process) exitError() error {
	return fmt.Errorf("%s exited early (%v); last log lines:\n%s", p.name, p.err, p.logTail(40))
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ProcessAlive reports whether a process with this pid exists (signal 0).
// A zombie counts as gone only once reaped, which the environment always does.
func ProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
