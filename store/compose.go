package store

// Compose returns s offering exactly the optional capabilities given, those
// that are not nil, beside s's own Store methods. It is ComposeWith for
// the capabilities it names: the result never offers [Sessions].
//
// A wrapper around a store (one that counts calls, traces them or injects
// faults) is a Store of its own, and a type assertion on it finds only the
// methods its type declares: without care it hides the capabilities of the
// store it wraps, and a lobby.Service over it then stops claiming, stops
// listening for changes or stops batching. Compose lets the wrapper pass
// on each capability of the wrapped store, wrapped or as is:
//
//	c, _ := inner.(store.Claimer)
//	n, _ := inner.(store.Notifier)
//	b, _ := inner.(store.BatchWriter)
//	return store.Compose(&counting{inner}, c, n, b)
//
// The result offers the capabilities given and no others: one that s
// itself implements is hidden unless it is passed.
func Compose(s Store, c Claimer, n Notifier, b BatchWriter) Store {
	return ComposeWith(s, Capabilities{Claimer: c, Notifier: n, BatchWriter: b})
}

// Capabilities names the optional capabilities ComposeWith passes on. A
// nil field passes nothing on.
type Capabilities struct {
	Claimer     Claimer
	Notifier    Notifier
	BatchWriter BatchWriter
	Sessions    Sessions
}

// Of returns the optional capabilities s implements itself: what a
// wrapper passes to ComposeWith to hide none of them.
func Of(s Store) Capabilities {
	var c Capabilities
	c.Claimer, _ = s.(Claimer)
	c.Notifier, _ = s.(Notifier)
	c.BatchWriter, _ = s.(BatchWriter)
	c.Sessions, _ = s.(Sessions)
	return c
}

// ComposeWith returns s offering exactly the optional capabilities of c
// that are not nil, beside s's own Store methods (see Compose). A wrapper
// that passes on every capability of the store it wraps writes
//
//	return store.ComposeWith(&counting{inner}, store.Of(inner))
//
// and replaces a field of the Capabilities to wrap that one.
func ComposeWith(s Store, c Capabilities) Store {
	o := storeOnly{s}
	mask := 0
	if c.Claimer != nil {
		mask |= 1
	}
	if c.Notifier != nil {
		mask |= 2
	}
	if c.BatchWriter != nil {
		mask |= 4
	}
	if c.Sessions != nil {
		mask |= 8
	}
	cl, n, b, ss := c.Claimer, c.Notifier, c.BatchWriter, c.Sessions
	switch mask {
	case 1:
		return &struct {
			storeOnly
			Claimer
		}{o, cl}
	case 2:
		return &struct {
			storeOnly
			Notifier
		}{o, n}
	case 3:
		return &struct {
			storeOnly
			Claimer
			Notifier
		}{o, cl, n}
	case 4:
		return &struct {
			storeOnly
			BatchWriter
		}{o, b}
	case 5:
		return &struct {
			storeOnly
			Claimer
			BatchWriter
		}{o, cl, b}
	case 6:
		return &struct {
			storeOnly
			Notifier
			BatchWriter
		}{o, n, b}
	case 7:
		return &struct {
			storeOnly
			Claimer
			Notifier
			BatchWriter
		}{o, cl, n, b}
	case 8:
		return &struct {
			storeOnly
			Sessions
		}{o, ss}
	case 9:
		return &struct {
			storeOnly
			Claimer
			Sessions
		}{o, cl, ss}
	case 10:
		return &struct {
			storeOnly
			Notifier
			Sessions
		}{o, n, ss}
	case 11:
		return &struct {
			storeOnly
			Claimer
			Notifier
			Sessions
		}{o, cl, n, ss}
	case 12:
		return &struct {
			storeOnly
			BatchWriter
			Sessions
		}{o, b, ss}
	case 13:
		return &struct {
			storeOnly
			Claimer
			BatchWriter
			Sessions
		}{o, cl, b, ss}
	case 14:
		return &struct {
			storeOnly
			Notifier
			BatchWriter
			Sessions
		}{o, n, b, ss}
	case 15:
		return &struct {
			storeOnly
			Claimer
			Notifier
			BatchWriter
			Sessions
		}{o, cl, n, b, ss}
	}
	return o
}

// storeOnly shows a Store's Store methods and nothing else.
type storeOnly struct{ Store }
