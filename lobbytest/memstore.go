package lobbytest

import (
	"github.com/lobbyhost/lobbyhost/store"
	"github.com/lobbyhost/lobbyhost/store/memstore"
)

// memstoreNew returns the reference store of the uninterrupted runs.
func memstoreNew() store.Store { return memstore.New(memstore.WithRetention(MinRetention)) }
