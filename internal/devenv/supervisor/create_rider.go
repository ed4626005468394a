package supervisor

import (
	"context"
	"encoding/json"
	"fmt"
)

// Rider is a rider that admin create-user made, as it printed it: the token is shown this once.
type Rider struct {
	ID    int64  `json:"id"`
	Email string `json:"email"`
	Token string `json:"token"`
}

// CreateRider makes a rider with a Stripe customer whose card is card (a Stripe test token such
// as tok_visa) by running the built admin command, as an operator would.
func (s *Supervisor) CreateRider(ctx context.Context, env []string, email, card string) (*Rider, error) {
	out, err := s.Output(ctx, "admin", env, "create-user", "-email", email, "-card", card)
	if err != nil {
		return nil, err
	}
	var rider Rider
	if err := json.Unmarshal(out, &rider); err != nil {
		return nil, fmt.Errorf("error reading create-user output %q: %w", out, err)
	}
	if rider.ID == 0 || rider.Token == "" {
		return nil, fmt.Errorf("create-user printed no rider: %q", out)
	}
	return &rider, nil
}
