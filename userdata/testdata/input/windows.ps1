<powershell>
Write-Host "hello"
Write-Host "world"
</powershell>
