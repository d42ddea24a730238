package agent

import (
	"context"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"go.uber.org/zap"
)

// notifier talks sd_notify to systemd. With no NOTIFY_SOCKET (a DaemonSet
// pod) every call is a no-op.
type notifier struct {
	log *zap.Logger
}

func (n notifier) send(state string) {
	ok, err := daemon.SdNotify(false, state)
	if err != nil {
		n.log.Warn("sd_notify", zap.String("state", state), zap.Error(err))
		return
	}
	if ok {
		n.log.Debug("sd_notify sent", zap.String("state", state))
	}
}

// watchdog pings WATCHDOG=1 every half watchdog interval while healthy()
// holds, until ctx ends. Without WATCHDOG_USEC it returns at once.
func (n notifier) watchdog(ctx context.Context, healthy func() bool) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("reading systemd watchdog settings", zap.Error(err))
		return
	}
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	missed := 0
	for {
		if healthy() {
			n.send(daemon.SdNotifyWatchdog)
			missed = 0
		} else {
			missed++
			if missed == 1 {
				n.log.Warn("unhealthy: withholding the systemd watchdog ping")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
