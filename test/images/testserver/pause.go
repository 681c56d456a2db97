package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// pause blocks until ctx is done. With reapZombies (as PID 1 of a pod that
// shares its PID namespace) it also waits for every child that exits.
func pause(ctx context.Context, reapZombies bool) error {
	children := make(chan os.Signal, 1)
	if reapZombies {
		signal.Notify(children, syscall.SIGCHLD)
		defer signal.Stop(children)
		reap()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-children:
			reap()
		}
	}
}

// reap waits for every child that has exited, without blocking.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
