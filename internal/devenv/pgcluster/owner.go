package pgcluster

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// serverUser is the OS user that runs the server when we are root, as Debian's packages create it.
const serverUser = "postgres"

// owner is the OS user initdb and postgres run as. Postgres refuses to run as root, so a root
// caller (a container, CI) hands the cluster to the postgres user; anyone else runs it as
// themselves, and credential is nil.
type owner struct {
	credential *syscall.Credential
}

func lookupOwner() (owner, error) {
	if os.Geteuid() != 0 {
		return owner{}, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return owner{}, fmt.Errorf("error finding the %q user, which runs Postgres since it refuses to run as root: %w", serverUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return owner{}, fmt.Errorf("error parsing uid of %q: %w", serverUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return owner{}, fmt.Errorf("error parsing gid of %q: %w", serverUser, err)
	}
	return owner{credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}, nil
}

// chown gives path to the owner, so that a server running as another user can write there.
func (o owner) chown(path string) error {
	if o.credential == nil {
		return nil
	}
	if err := os.Chown(path, int(o.credential.Uid), int(o.credential.Gid)); err != nil {
		return fmt.Errorf("error handing %s to the %q user: %w", path, serverUser, err)
	}
	return nil
}

// sysProcAttr runs a child as the owner, and kills it if we die first: a test binary that panics
// or times out must not leave a server behind. Go sets the parent-death signal after changing
// credentials, so it survives the change of user. The child gets a process group of its own, so
// that a Ctrl-C in the terminal reaches only us: we stop the server ourselves, after everything
// that uses it.
func (o owner) sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: o.credential, Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// RunAsOwner makes cmd run as the OS user that this package runs Postgres as (postgres, when
// we are root), with the same safeguards as the server: for other Postgres tools that refuse
// root, such as pg_auto_failover's pg_autoctl.
func RunAsOwner(cmd *exec.Cmd) error {
	o, err := lookupOwner()
	if err != nil {
		return err
	}
	cmd.SysProcAttr = o.sysProcAttr()
	return nil
}

// GiveToOwner hands path to the OS user that RunAsOwner runs commands as.
func GiveToOwner(path string) error {
	o, err := lookupOwner()
	if err != nil {
		return err
	}
	return o.chown(path)
}
