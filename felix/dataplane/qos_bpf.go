package dataplane

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Egress shaping needs the packets a workload sends on an ifb device.
// Calico moves them there with a tc mirred action; kernels without the tc
// action modules (act_mirred) cannot, so we attach a four-instruction eBPF
// classifier in direct-action mode (cls_bpf, no action module) that calls
// bpf_redirect to the ifb. The ifb then hands each packet, after its tbf,
// back to the host veth's receive path, as it does after mirred.

const (
	bpfCmdProgLoad     = 5  // BPF_PROG_LOAD
	bpfProgSchedCls    = 3  // BPF_PROG_TYPE_SCHED_CLS
	bpfFuncRedirect    = 23 // bpf_redirect(ifindex, flags)
	bpfOpMovImm        = 0xb7
	bpfOpCall          = 0x85
	bpfOpExit          = 0x95
	bpfRegArg1         = 1
	bpfRegArg2         = 2
	bpfInstructionSize = 8
)

// bpfProgLoadAttr is the head of union bpf_attr for BPF_PROG_LOAD.
type bpfProgLoadAttr struct {
	progType, insnCnt  uint32
	insns, license     uint64
	logLevel, logSize  uint32
	logBuf             uint64
	kernVersion, flags uint32
}

// redirectProgram is "return bpf_redirect(ifindex, 0)": the verdict is
// TC_ACT_REDIRECT, so the packet goes out of ifindex.
func redirectProgram(ifindex int) []byte {
	insn := func(op, regs uint8, imm int32) []byte {
		b := make([]byte, bpfInstructionSize)
		b[0], b[1] = op, regs
		binary.LittleEndian.PutUint32(b[4:], uint32(imm))
		return b
	}
	var p []byte
	p = append(p, insn(bpfOpMovImm, bpfRegArg1, int32(ifindex))...)
	p = append(p, insn(bpfOpMovImm, bpfRegArg2, 0)...)
	p = append(p, insn(bpfOpCall, 0, bpfFuncRedirect)...)
	return append(p, insn(bpfOpExit, 0, 0)...)
}

// loadRedirect loads redirectProgram(ifindex) and returns its descriptor;
// the caller closes it once a filter holds the program.
func loadRedirect(ifindex int) (int, error) {
	prog, license := redirectProgram(ifindex), []byte("GPL\x00")
	attr := bpfProgLoadAttr{progType: bpfProgSchedCls, insnCnt: uint32(len(prog) / bpfInstructionSize),
		insns: uint64(uintptr(unsafe.Pointer(&prog[0]))), license: uint64(uintptr(unsafe.Pointer(&license[0])))}
	fd, _, errno := unix.Syscall(unix.SYS_BPF, bpfCmdProgLoad, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(prog)
	runtime.KeepAlive(license)
	if errno != 0 {
		return -1, fmt.Errorf("loading the egress redirect program: %w", errno)
	}
	return int(fd), nil
}

// EgressShapingSupported reports whether this kernel loads the redirect
// program; without it egress bandwidth is policed by iptables instead
// (felix/rules/qos.go).
func EgressShapingSupported() bool {
	fd, err := loadRedirect(1)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}
