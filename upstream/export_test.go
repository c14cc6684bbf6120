package upstream

// SDKOnly makes p send every tools/call through go-sdk's client, so tests
// can compare the two paths.
func SDKOnly(p *Pool) *Pool {
	p.sdkOnly = true
	return p
}
