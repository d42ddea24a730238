package volumes

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// nvmeAdminCmd is struct nvme_admin_cmd from <linux/nvme_ioctl.h> (72 bytes).
type nvmeAdminCmd struct {
	opcode      uint8
	flags       uint8
	rsvd1       uint16
	nsid        uint32
	cdw2, cdw3  uint32
	metadata    uint64
	addr        uint64
	metadataLen uint32
	dataLen     uint32
	cdw10       uint32
	cdw11       uint32
	cdw12       uint32
	cdw13       uint32
	cdw14       uint32
	cdw15       uint32
	timeoutMs   uint32
	result      uint32
}

const (
	nvmeIoctlAdminCmd   = 0xC0484E41 // _IOWR('N', 0x41, struct nvme_admin_cmd)
	nvmeIdentify        = 0x06
	ebsVendorNameOffset = 3072 // vendor-specific area of Identify Controller: bdev[32]
)

// nvmeMappingName reads the block-device-mapping name (e.g. "sdf" or
// "/dev/xvdb") that EBS stores in the vendor-specific area of the NVMe
// Identify Controller data, as ebsnvme-id does.
func nvmeMappingName(devPath string) (string, error) {
	if !strings.HasPrefix(filepath.Base(devPath), "nvme") {
		return "", fmt.Errorf("%s: not an NVMe device", devPath)
	}
	f, err := os.Open(devPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 4096)
	cmd := nvmeAdminCmd{opcode: nvmeIdentify, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), dataLen: uint32(len(buf)), cdw10: 1}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nvmeIoctlAdminCmd, uintptr(unsafe.Pointer(&cmd))); errno != 0 {
		return "", fmt.Errorf("NVMe identify on %s: %w", devPath, errno)
	}
	runtime.KeepAlive(buf)
	name := strings.TrimRight(string(buf[ebsVendorNameOffset:ebsVendorNameOffset+32]), " \x00")
	return name, nil
}
