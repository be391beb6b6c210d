module github.com/spillwayhq/spillway

go 1.26.8
