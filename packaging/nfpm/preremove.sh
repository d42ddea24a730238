#!/bin/sh
# Stop the agent on removal (not on upgrade: deb passes "upgrade", rpm passes 1).
set -e
case "$1" in
  remove|purge|0)
    if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
      systemctl disable --now joiner-agent.service joiner-bootstrap.service >/dev/null 2>&1 || true
    fi
    ;;
esac
exit 0
