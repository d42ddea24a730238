package aws

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/internal/telemetry"
)

// Where the prices of a capacity type come from (PriceSources, the
// joiner_price_source metric).
const (
	// sourcePricingAPI: on-demand prices read from the AWS Pricing API.
	sourcePricingAPI = "pricing-api"
	// sourceEmbedded: the region's embedded price snapshot.
	sourceEmbedded = "embedded"
	// sourceEmbeddedFallback: us-east-1's embedded snapshot, for a region
	// without one of its own.
	sourceEmbeddedFallback = "embedded-us-east-1"
	// sourceSpotHistory: spot prices from DescribeSpotPriceHistory.
	sourceSpotHistory = "spot-price-history"
	// sourceSpotModel: catalog.SpotModel, until the spot price history
	// answers.
	sourceSpotModel = "model"
)

// priceRetry is the first wait after a failed price refresh; it doubles
// up to the refresh interval.
const priceRetry = time.Minute

// priceState is the provider's on-demand price table, where each capacity
// type's prices come from, and when each is refreshed next.
type priceState struct {
	log    *zap.Logger
	gauge  *prometheus.GaugeVec
	every  time.Duration
	mu     sync.Mutex
	table  *catalog.PriceTable
	source map[string]string // capacity type -> source
	due    map[string]time.Time
	wait   map[string]time.Duration // the next retry wait after a failure
}

func newPriceState(opts Options, log *zap.Logger) (*priceState, error) {
	s := &priceState{log: log, every: opts.SpotPriceRefresh, source: map[string]string{},
		due: map[string]time.Time{}, wait: map[string]time.Duration{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "joiner_price_source",
			Help: "Where the prices of each capacity type come from now (1): on-demand pricing-api, embedded or embedded-us-east-1; spot spot-price-history or model."},
			[]string{"capacity_type", "source"})}
	if err := telemetry.Register(opts.Registerer, "aws prices", s.gauge); err != nil {
		return nil, err
	}
	table, exact := catalog.PricesFor(opts.Region)
	src := sourceEmbedded
	if !exact {
		src = sourceEmbeddedFallback
	}
	s.setOnDemand(table, src, zap.String("region", opts.Region))
	s.setSource(karpv1.CapacityTypeSpot, sourceSpotModel)
	return s, nil
}

func (s *priceState) onDemandTable() *catalog.PriceTable {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table
}

// setOnDemand prices on-demand offerings with t from now on.
func (s *priceState) setOnDemand(t *catalog.PriceTable, source string, fields ...zap.Field) {
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
	s.setSource(karpv1.CapacityTypeOnDemand, source, append(fields, zap.String("prices_from", t.Region),
		zap.Time("prices_generated", t.Generated), zap.Int("priced_types", t.Len()))...)
}

// setSource records where a capacity type's prices come from and says so
// once when that changes: a warning when on-demand prices are another
// region's.
func (s *priceState) setSource(capacityType, source string, fields ...zap.Field) {
	s.mu.Lock()
	old := s.source[capacityType]
	s.source[capacityType] = source
	s.mu.Unlock()
	if old == source {
		return
	}
	if old != "" {
		s.gauge.DeleteLabelValues(capacityType, old)
	}
	s.gauge.WithLabelValues(capacityType, source).Set(1)
	fields = append(fields, zap.String("capacity_type", capacityType), zap.String("source", source))
	if source == sourceEmbeddedFallback {
		s.log.Warn("no embedded on-demand prices for this region: pricing offerings like us-east-1 until the Pricing API answers", fields...)
		return
	}
	if old != "" || capacityType == karpv1.CapacityTypeOnDemand {
		s.log.Info("price source", fields...)
	}
}

// sources returns a copy of the capacity type -> source map.
func (s *priceState) sources() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.source))
	for k, v := range s.source {
		out[k] = v
	}
	return out
}

// PriceSources says where the prices of each capacity type come from
// now: on-demand "pricing-api", "embedded" (the region's snapshot) or
// "embedded-us-east-1" (another region's); spot "spot-price-history" or
// "model".
func (p *Provider) PriceSources() map[string]string { return p.prices.sources() }

// OnDemandPrices is the table on-demand offerings are priced with.
func (p *Provider) OnDemandPrices() *catalog.PriceTable { return p.prices.onDemandTable() }

// refreshPrices refreshes the prices that are due (on-demand from the
// Pricing API, spot from the spot price history) and returns how long
// until the next are: the refresh interval after a success, a retry
// doubling from priceRetry up to the interval after a failure.
func (p *Provider) refreshPrices(ctx context.Context) time.Duration {
	s := p.prices
	for _, job := range []struct {
		kind    string
		refresh func(context.Context) error
	}{
		{karpv1.CapacityTypeOnDemand, p.RefreshOnDemandPrices},
		{karpv1.CapacityTypeSpot, p.RefreshSpotPrices},
	} {
		s.mu.Lock()
		due := s.due[job.kind]
		s.mu.Unlock()
		if p.now().Before(due) {
			continue
		}
		err := job.refresh(ctx)
		s.mu.Lock()
		next := s.every
		if err != nil {
			next = max(s.wait[job.kind], priceRetry)
			s.wait[job.kind] = min(2*next, s.every)
		} else {
			delete(s.wait, job.kind)
		}
		s.due[job.kind] = p.now().Add(next)
		s.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			p.log.Warn("refreshing prices (the last known stay)", zap.String("capacity_type", job.kind), zap.Duration("retry_in", next), zap.Error(err))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := s.every
	for _, due := range s.due {
		wait = min(wait, max(due.Sub(p.now()), 0))
	}
	return wait
}
