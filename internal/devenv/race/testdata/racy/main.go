// Command racy has a data race on purpose: tests build it as they build the project's commands
// and check that the race detector's report fails them.
package main

import "fmt"

func main() {
	counter := 0
	done := make(chan struct{})
	go func() {
		counter++ // races with main's increment: nothing orders the two
		close(done)
	}()
	counter++
	<-done
	fmt.Println("racy: done, counter", counter)
}
