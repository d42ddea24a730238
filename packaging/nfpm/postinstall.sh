#!/bin/sh
# The units are installed but not enabled: the AMI build (or the operator)
# enables them with `systemctl enable joiner-bootstrap.service joiner-agent.service`.
set -e
# Not when installed into another root (dpkg --root, image builds).
if [ -z "${DPKG_ROOT:-}" ] && [ -d /run/systemd/system ]; then
  systemctl daemon-reload >/dev/null 2>&1 || true
fi
exit 0
