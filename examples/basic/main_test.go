package main

// The program's output is its promise: the limit holds and the counts add up.
func Example() {
	main()
	// Output:
	// ann again: order "order-3": stock: per-user limit reached: SKU "phone"
	// available 8, held 0, sold 2
}
