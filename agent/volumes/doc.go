// Package volumes discovers the instance's block devices and lays out its
// data volumes without ever formatting a disk that holds data.
//
// The pipeline is discover (sysfs, /dev links, mountinfo, NVMe identify; a
// pure-Go signature probe plus blkid -p and wipefs -n) -> PlanVolumes (pure:
// inventory + config + journal -> actions) -> Executor (mdadm, mkfs, .mount
// units, mounts). Setup runs all three; Recheck is the agent-start variant
// that never formats unless config.Volumes.FormatOnAgentStart.
//
// Safety rules, in the order the planner applies them:
//   - the root disk, and any disk that is partitioned, held (md/dm), swap,
//     read-only or mounted elsewhere, is never touched;
//   - a disk with any signature (filesystem, RAID, LVM, LUKS, swap, partition
//     table incl. a backup GPT header alone) seen by the probe or by
//     blkid/wipefs is left alone, unless it is a filesystem whose UUID the
//     journal says joiner created on that disk;
//   - a disk with no signature but non-zero bytes in its first or last MiB is
//     left alone unless AllowNonZero;
//   - the executor probes again right before mdadm/mkfs and refuses if
//     anything appeared; mkfs never gets -f.
//
// Crash safety: the planner picks the new filesystem's UUID and the journal
// (StateDir/volumes.json, written atomically) records it in phase
// "formatting" before mkfs runs and "formatted" after. A re-run that finds
// that UUID on the disk mounts it (after xfs_repair -n / e2fsck -fn when the
// journal still says "formatting") and never formats again. Unit files are
// written atomically and only when their content changes, so re-running is a
// no-op. With config Persist "fstab", UUID= lines go into a block of the
// fstab that joiner owns instead of unit files; other lines are never changed.
package volumes
