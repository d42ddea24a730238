package fsm

import "context"

// Proposer commits an encoded command through raft. Its response is the
// FSM's: nil, or an error value when a precondition of the command failed.
// cluster.RaftProposer implements it.
type Proposer interface {
	Propose(ctx context.Context, cmd []byte) (any, error)
}

// Propose encodes cmd as a command of type t, commits it through p and
// returns the command's error: the proposal's own, or the FSM's error
// response.
func Propose(ctx context.Context, p Proposer, t MessageType, cmd any) error {
	buf, err := Encode(t, cmd)
	if err != nil {
		return err
	}
	resp, err := p.Propose(ctx, buf)
	if err != nil {
		return err
	}
	if rerr, ok := resp.(error); ok {
		return rerr
	}
	return nil
}
