module boxer

go 1.26.8
