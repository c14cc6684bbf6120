// Package bufpool keeps byte buffers for reuse by an owner that fills one,
// hands its bytes to something that copies them (an io.Writer, a database
// driver binding a blob), and is then done with it. The domain package
// keeps its own pool of hash inputs, since it imports only the standard
// library.
package bufpool

import "sync"

// Pool holds buffers that start at a size and are kept up to a largest
// capacity: a rare large buffer is left to the collector rather than held.
type Pool struct {
	p   sync.Pool
	max int
}

// New returns a Pool whose new buffers have capacity size and which keeps
// buffers of capacity up to max.
func New(size, max int) *Pool {
	return &Pool{p: sync.Pool{New: func() any { b := make([]byte, 0, size); return &b }}, max: max}
}

// Get returns an empty buffer; append to (*bp)[:0] and give the result to
// Put when its bytes are no longer read.
func (p *Pool) Get() *[]byte {
	bp := p.p.Get().(*[]byte)
	*bp = (*bp)[:0]
	return bp
}

// Put returns b, grown from the buffer *bp came with, to the pool. Nothing
// may read b afterwards.
func (p *Pool) Put(bp *[]byte, b []byte) {
	if bp != nil && cap(b) <= p.max {
		*bp = b[:0]
		p.p.Put(bp)
	}
}
