package lobby

import "time"

// t0 is the instant the tests start their fake clocks at.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
