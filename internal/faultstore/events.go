package faultstore

import (
	"context"
	"time"

	"github.com/ladderhq/ladder"
)

// FanOut passes to the wrapped store unless writes fail.
func (s *Store) FanOut(ctx context.Context, limit int, targets func(ladder.Event) []string) (int, error) {
	if err := s.write(ctx); err != nil {
		return 0, err
	}
	return s.next.FanOut(ctx, limit, targets)
}

// ClaimDeliveries passes to the wrapped store unless writes fail.
func (s *Store) ClaimDeliveries(ctx context.Context, limit int, lease time.Duration, slots map[string]int) ([]ladder.Delivery, error) {
	if err := s.write(ctx); err != nil {
		return nil, err
	}
	return s.next.ClaimDeliveries(ctx, limit, lease, slots)
}

// FinishDelivery passes to the wrapped store unless writes fail.
func (s *Store) FinishDelivery(ctx context.Context, r ladder.DeliveryResult) error {
	if err := s.write(ctx); err != nil {
		return err
	}
	return s.next.FinishDelivery(ctx, r)
}

// ListDeliveries passes to the wrapped store unless reads fail.
func (s *Store) ListDeliveries(ctx context.Context, q ladder.DeliveryQuery) ([]ladder.Delivery, error) {
	if err := s.read(ctx); err != nil {
		return nil, err
	}
	return s.next.ListDeliveries(ctx, q)
}

// Redeliver passes to the wrapped store unless writes fail.
func (s *Store) Redeliver(ctx context.Context, workspace, id string) (ladder.Delivery, error) {
	if err := s.write(ctx); err != nil {
		return ladder.Delivery{}, err
	}
	return s.next.Redeliver(ctx, workspace, id)
}

// DeliveryStats passes to the wrapped store unless reads fail.
func (s *Store) DeliveryStats(ctx context.Context) (ladder.DeliveryStats, error) {
	if err := s.read(ctx); err != nil {
		return ladder.DeliveryStats{}, err
	}
	return s.next.DeliveryStats(ctx)
}

// RetireDeliveries passes to the wrapped store unless writes fail.
func (s *Store) RetireDeliveries(ctx context.Context, endpoints []string, reason string) (map[string]int, error) {
	if err := s.write(ctx); err != nil {
		return nil, err
	}
	return s.next.RetireDeliveries(ctx, endpoints, reason)
}

// PruneDeliveries passes to the wrapped store unless writes fail.
func (s *Store) PruneDeliveries(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.write(ctx); err != nil {
		return 0, err
	}
	return s.next.PruneDeliveries(ctx, before, limit)
}
