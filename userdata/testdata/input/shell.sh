#!/bin/bash
echo "hello from user data"
