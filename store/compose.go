package store

// Compose returns s offering exactly the optional capabilities given, those
// that are not nil, beside s's own Store methods.
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
	type (
		sc struct {
			storeOnly
			Claimer
		}
		sn struct {
			storeOnly
			Notifier
		}
		sb struct {
			storeOnly
			BatchWriter
		}
		scn struct {
			storeOnly
			Claimer
			Notifier
		}
		scb struct {
			storeOnly
			Claimer
			BatchWriter
		}
		snb struct {
			storeOnly
			Notifier
			BatchWriter
		}
		scnb struct {
			storeOnly
			Claimer
			Notifier
			BatchWriter
		}
	)
	o := storeOnly{s}
	switch {
	case c != nil && n != nil && b != nil:
		return &scnb{o, c, n, b}
	case c != nil && n != nil:
		return &scn{o, c, n}
	case c != nil && b != nil:
		return &scb{o, c, b}
	case n != nil && b != nil:
		return &snb{o, n, b}
	case c != nil:
		return &sc{o, c}
	case n != nil:
		return &sn{o, n}
	case b != nil:
		return &sb{o, b}
	}
	return o
}

// storeOnly shows a Store's Store methods and nothing else.
type storeOnly struct{ Store }
