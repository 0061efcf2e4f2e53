from sweeper.measure.process import entry

entry()
